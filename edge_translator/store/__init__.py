"""``edge-translator models``: the bundles there are, and adding, checking, packing and removing them."""
