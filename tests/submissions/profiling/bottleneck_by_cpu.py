# exercise: profiling.bottleneck
# function: bottleneck
# verdict: failed
# says: leads by cpu time
# Mistake: ranks operators by self CPU time even when the profile has device times.
def bottleneck(table):
    ops = [r for r in table if r["kind"] == "op"]
    return max(ops, key=lambda r: r["self_cpu_us"])["name"]
