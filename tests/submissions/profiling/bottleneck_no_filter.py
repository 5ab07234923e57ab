# exercise: profiling.bottleneck
# function: bottleneck
# verdict: failed
# says: is a gpu kernel, not an operator
# Mistake: right key, but kernels compete with operators.
def bottleneck(table):
    key = "self_device_us" if any(r["self_device_us"] > 0 for r in table) else "self_cpu_us"
    return max(table, key=lambda r: r[key])["name"]
