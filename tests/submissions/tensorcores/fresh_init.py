# exercise: tensorcores.pad_model
# function: pad_model
# verdict: failed
# says: logits on the real vocabulary changed
# seed: 20261202
# mutant-of: tensorcores/pad_to_4.py
"""Copies the weights into a freshly initialised bigger model: the padded rows and columns keep their random
values, so padded channels leak into the real ones and the logits change."""
# @@
#      def up(n):
# -        return -(-n // 4) * 4
# +        return -(-n // 8) * 8
#
# @@
#      with torch.no_grad():
# -        for p in padded.parameters():
# -            p.zero_()
#          padded.embed.weight[:vocab, :d] = model.embed.weight
