"""`python -m suite gpu-check`: the check of a CUDA machine, run in whatever environment already holds the CUDA
stack. It reports the stack it found (`stack`), prints its plan and time estimate (`plan`), runs the gpu tests
with a timeout each (`tests_step`), sweeps every family in one worker (`sweep_step`) and leaves one small
folder that travels (`bundle`). `wheels` builds the folder of what the suite adds on top of a CUDA stack, for
a machine with no package index."""
