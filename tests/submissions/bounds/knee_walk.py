# exercise: bounds.knee
# function: knee
# verdict: failed
# says: a spike
# Mistake: walks the sweep in the order given and stops at the first point over the line.
def knee(batches, times):
    fastest = min(times)
    last = batches[0]
    for b, t in zip(batches, times):
        if t > 1.5 * fastest:
            break
        last = b
    return last
