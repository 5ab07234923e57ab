# exercise: profiling.bottleneck
# function: bottleneck
# verdict: failed
# says: leads by total time
# Mistake: operators only, but ranked by total time, which counts the ops each one calls.
def bottleneck(table):
    ops = [r for r in table if r["kind"] == "op"]
    key = "device_total_us" if any(r["self_device_us"] > 0 for r in table) else "cpu_total_us"
    return max(ops, key=lambda r: r[key])["name"]
