# exercise: tensorcores.pad_model
# function: pad_model
# verdict: failed
# says: its padded logits enter the softmax
# mutant-of: tensorcores/pad_to_4.py
"""Pads every width to a multiple of 64 and copies the weights right, but leaves the model's `vocab` at the padded
size: its logits on the real vocabulary are the original's, yet `padded.loss` runs the softmax over the padded
(zero) logits too, so training it minimises another loss. Both machines passed it when only the logits and the
matmul shapes were compared."""
# @@
#      def up(n):
# -        return -(-n // 4) * 4
# +        return -(-n // 64) * 64
