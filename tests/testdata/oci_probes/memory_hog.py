# Allocates up to 1 GiB in 64 MiB steps, printing the running total, to show where the memory limit stops it.
import sys
chunks = []
try:
    for i in range(16):
        chunks.append(bytearray(64 << 20))
        print(len(chunks) * 64, flush=True)
    print("allocated all", flush=True)
except MemoryError:
    print("MemoryError", flush=True)
