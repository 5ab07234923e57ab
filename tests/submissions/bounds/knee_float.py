# exercise: bounds.knee
# function: knee
# verdict: failed
# says: expected a batch size, an int
# Mistake: returns a float (e.g. from numpy or a division), not a batch size.
def knee(batches, times):
    fastest = min(times)
    return float(max(b for b, t in zip(batches, times) if t <= 1.5 * fastest))
