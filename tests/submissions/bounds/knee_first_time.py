# exercise: bounds.knee
# function: knee
# verdict: failed
# says: cold first
# Mistake: takes the first (smallest) batch's time as the floor; a cold first call moves the line.
def knee(batches, times):
    pairs = sorted(zip(batches, times))
    floor = pairs[0][1]
    return max(b for b, t in pairs if t <= 1.5 * floor)
