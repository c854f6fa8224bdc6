"""The parts of bench/chaos_matrix.py: the job, its checkpoints, the faults and what they set up."""
