"""pipewright.torch: pipewright's measurements of the user's own PyTorch layers.

    >>> from pipewright.torch import profile
    >>> p = profile(layers, example_input, out="profile.json")   # then: pipewright plan --profile profile.json

The compiled module is not needed to profile layers; only `model=` (a pipewright model to key the entries by)
reads it.
"""

from pipewright.torch.profile import profile

__all__ = ["profile"]
