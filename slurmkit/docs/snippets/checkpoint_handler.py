"""train.py: stop cleanly on the preemption signal and resume from the last checkpoint when restarted."""
import json
import os
import signal
import sys
import time

CKPT = "checkpoint.json"
stop = False


def on_signal(signum, frame):  # keep it short: set a flag, act on it between two steps
    global stop
    stop = True


signal.signal(signal.SIGUSR1, on_signal)
step = 0
if os.path.exists(CKPT):  # a restart (SLURM_RESTART_COUNT > 0): resume
    with open(CKPT) as f:
        step = json.load(f)["step"]
print(f"starting at step {step} (restart {os.environ.get('SLURM_RESTART_COUNT', 0)})", flush=True)
while step < 10_000:
    time.sleep(0.01)  # one training step
    step += 1
    if stop:
        with open(CKPT + ".tmp", "w") as f:
            json.dump({"step": step}, f)
        os.replace(CKPT + ".tmp", CKPT)  # atomic: a kill during the save leaves the old checkpoint
        print(f"saved at step {step}", flush=True)
        sys.exit(0)
