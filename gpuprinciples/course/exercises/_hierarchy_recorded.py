"""What lesson 11's GPU measurements gave on an H200, for machines without a GPU.

Copied from the JSON that `tools/tune_matmul.py` wrote on one NVIDIA H200 (132 SMs), 2026-12-03 13:50 UTC,
torch 2.11.0+cu130, Triton 3.6.0 (the course's other H200 figures are in docs/measured.md). Every figure
is what that run printed, rounded to three digits: bandwidths in bytes per second, latencies in seconds,
matmul rates in TFLOP/s. The matmul rows were measured with kernels/matmul.py as of commit f4b4567: its
pointer loads were masked on every K step and had no ALIGN hint (the "no 16-byte hint" rows).

The lesson's GPU cells measure the same things again; without a GPU it shows these, labelled as recorded,
and `hierarchy.l2_cliff` grades against `CLIFF` (on a GPU, against a measurement made during the check).
"""

SOURCE = ("recorded on an NVIDIA H200 (132 SMs, L2 60 MiB as the device reports it), 2026-12-03, torch "
          "2.11.0+cu130, Triton 3.6.0, by tools/tune_matmul.py")

L2_BYTES = 62_914_560  # torch.cuda.get_device_properties(0).L2_cache_size on that H200
COPY_BANDWIDTH = 4.251e12  # calibrate.ceilings(): dst.copy_(src) of 1 GiB, bytes read + written
BF16_MATMUL_TFLOPS = 782.8  # calibrate.ceilings(): torch.mm 8192³

# kernels/bandwidth.working_set_bandwidth(level="l2"): (buffer bytes, bytes/s), rotating chunks cached in L2 only
L2_CURVE = ((811_008, 1.76e12), (1_892_352, 2.95e12), (4_055_040, 4.01e12), (8_110_080, 7.41e12),
            (16_220_160, 9.13e12), (23_789_568, 9.80e12), (32_440_320, 9.41e12), (38_928_384, 9.39e12),
            (47_579_136, 8.60e12), (64_880_640, 7.11e12), (95_158_272, 4.51e12), (129_761_280, 4.34e12),
            (268_173_312, 4.33e12), (536_346_624, 4.32e12), (1_072_693_248, 4.30e12))
# level="l1": (bytes per SM, bytes/s), every program re-reading its own chunk, cached in L1
L1_CURVE = ((16_384, 7.93e12), (32_768, 14.4e12), (65_536, 21.8e12), (98_304, 24.5e12), (131_072, 25.5e12),
            (163_840, 21.0e12), (196_608, 19.8e12), (262_144, 18.7e12), (393_216, 8.68e12), (524_288, 3.89e12),
            (1_048_576, 3.84e12))
# pointer_chase, seconds per dependent load. That run flushed the L2 before each timed chase, so its "L2" chase
# (20,000 loads into a 4 MiB buffer, each to a line not read before) missed to HBM: 309 ns is not an L2 latency.
# pointer_chase now reads the buffer into L2 first when it fits; this figure is left out until measured so.
LATENCY = {"L1 (16 KiB, .ca)": 2.03e-8, "HBM (1 GiB, .cg)": 3.41e-7}
# working_set_bandwidth of 1 GiB (HBM) with programs per SM × block floats: bytes/s
IN_FLIGHT = {(1, 512): 1.36e12, (1, 2048): 2.23e12, (1, 8192): 2.87e12, (2, 512): 2.50e12, (2, 2048): 3.62e12,
             (2, 8192): 4.05e12, (4, 512): 3.84e12, (4, 2048): 4.36e12, (4, 8192): 4.42e12, (8, 512): 4.38e12,
             (8, 2048): 4.41e12, (8, 8192): 4.36e12}
# hierarchy.measure_cliff(): bandwidth at each of CLIFF_SIZES_MIB, and HBM's (a buffer 16× the L2)
CLIFF = {"bandwidths": {8: 7.41e12, 24: 9.82e12, 96: 4.50e12, 384: 4.32e12}, "hbm": 4.27e12, "l2_bytes": L2_BYTES}
# 128×256 tiles, one program per tile, N = 2816, K = 8192: (M, tiles, triton TFLOP/s, cuBLAS TFLOP/s)
WAVES = ((1536, 132, 747.0, 774.0), (1537, 143, 407.0, 735.0))
# kernels/matmul at 8192³ and at 8191×8200×8184 in bf16: (configuration, TFLOP/s, cuBLAS's in the same run,
# the median ratio of cuBLAS's time to ours)
SWEEP = {
    "8192³": (("128×256×64 w8 s3, one program per tile", 759.0, 785.0, 0.97),
              ("the same, persistent: one program per SM", 772.0, 770.0, 1.00),
              ("the same, GROUP_M = 1 (row-major order)", 720.0, 775.0, 0.93),
              ("the same, pointer loads", 725.0, 781.0, 0.93),
              ("128×128×64 w4 s4", 675.0, 782.0, 0.86),
              ("128×128×64 w4 s4, pointer loads", 508.0, 789.0, 0.64)),
    "8191×8200×8184": (("128×256×64 w8 s3, one program per tile", 572.0, 763.0, 0.75),
                       ("the same, persistent: one program per SM", 619.0, 762.0, 0.82),
                       ("the same, GROUP_M = 1 (row-major order)", 452.0, 760.0, 0.60),
                       ("the same, pointer loads (no 16-byte hint)", 132.0, 773.0, 0.17),
                       ("128×128×64 w4 s4", 437.0, 768.0, 0.57),
                       ("128×128×64 w4 s4, pointer loads (no 16-byte hint)", 55.9, 778.0, 0.07)),
}
# The row-alignment question of lesson 11 section 6, timed on an H200 on 2026-12-03 (a later run, same versions, the
# kernel as committed then: persistent 128×256×64): the ragged shape as it is, and the same numbers stored with rows
# padded to 128 bytes (8192, 8256 and 8256 elements apart). (label, TFLOP/s, cuBLAS's in the same run, the median
# ratio of cuBLAS's time to ours)
ROWS = (("8191×8200×8184, rows as they are (16-byte aligned)", 620.0, 789.0, 0.79),
        ("the same numbers, rows padded to 128 bytes", 815.0, 818.0, 1.00))
