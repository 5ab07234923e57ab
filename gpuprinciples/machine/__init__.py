"""What this machine is, without measuring it: GPU or interpreter (runtime, decided before any kernel is
defined), the GPUs' spec sheets, occupancy arithmetic. The ground floor: imports nothing of the package."""
