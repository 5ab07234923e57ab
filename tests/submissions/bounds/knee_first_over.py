# exercise: bounds.knee
# function: knee
# verdict: failed
# says: too late
# Mistake: returns the first batch past the line, not the last one still under it.
def knee(batches, times):
    fastest = min(times)
    pairs = sorted(zip(batches, times))
    for b, t in pairs:
        if t > 1.5 * fastest:
            return b
    return pairs[-1][0]
