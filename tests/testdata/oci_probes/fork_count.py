# Only the first process forks, so the count it reaches is the number of processes the limits allow.
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError as e:
    print(n, e.strerror, flush=True)
time.sleep(60)
