def cos_cos(x):
    return x.does_not_exist()
