def cos_cos(x):
    while True:  # never returns
        pass
