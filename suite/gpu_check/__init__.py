"""`python -m suite gpu-check`: the check of a CUDA machine, run in whatever environment already holds the CUDA
stack. It reports the stack it found (`stack`), prints its plan and time estimate (`plan`: the registry's
families and phases from `jobs`, costed by `estimate`, cut to the budget by `fit`), runs the gpu tests with a
timeout each (`tests_step`), sweeps every family in one worker (`sweep_step`) and leaves one small folder that
travels (`bundle`), its summary read against the field's published figures (`anchors`). `wheels` builds the folder of what the suite adds on top of a CUDA stack, for
a machine with no package index."""
