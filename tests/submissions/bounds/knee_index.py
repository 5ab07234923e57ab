# exercise: bounds.knee
# function: knee
# verdict: failed
# says: not one of the batch sizes
# Mistake: returns the position in the sweep, not the batch size.
def knee(batches, times):
    fastest = min(times)
    return max(i for i, t in enumerate(times) if t <= 1.5 * fastest)
