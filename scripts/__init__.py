"""Commands that ran the project's measurements and calibrations, kept so that each result can be produced again.

Run them from the checkout's root as modules (``python -m scripts.NAME …``: the checkout is then importable with no
path edits). The logic they share with the tool lives in the packages; what is here drives a device session (the H200
scripts need the card and PyTorch) or a long calibration. Summaries computed from their output are ``kdvfs summarize``.
"""
