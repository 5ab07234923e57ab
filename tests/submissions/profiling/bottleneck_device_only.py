# exercise: profiling.bottleneck
# function: bottleneck
# verdict: failed
# says: no device times
# Mistake: always ranks by device time; a CPU-only profile has none.
def bottleneck(table):
    ops = [r for r in table if r["kind"] == "op"]
    return sorted(ops, key=lambda r: r["self_device_us"], reverse=True)[0]["name"]
