"""Real faulty torch.distributed jobs for measuring commcanary's diagnoses (see ../diagnosis_accuracy.py)."""
