"""The refusal catalogues' cases, by what they spoil (not test modules): bad inputs and numbers
(`inputs`), bad flag values (`flags`), damaged frozen files (`frozen`), outputs that may not be
written (`outputs`) and paths a command may not trust (`trust`).

Every case names the command it runs.  The tests are organised by command:
`tests/test_refusals_<command>.py` runs that command's cases of every catalogue, and
`tests/test_catalogues.py` checks that every case is run by exactly one of them.
"""
