# exercise: profiling.bottleneck
# function: bottleneck
# verdict: failed
# says: is an annotation
# Mistake: ranks every row by total time: the step's own annotation wins.
def bottleneck(table):
    key = "device_total_us" if any(r["device_total_us"] > 0 for r in table) else "cpu_total_us"
    return max(table, key=lambda r: r[key])["name"]
