
raise RuntimeError("broken at import")


def cos_cos(x):
    return x
