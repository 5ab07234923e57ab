"""What lessons use beside their exercises: widgets, a decoder, the roofline, models, drawings,
progress bars, and real torch.distributed launched from a notebook."""
