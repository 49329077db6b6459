"""A training script whose log is the test: between BEGIN and END, `--lines` numbered lines with blank
lines among them (one every 50, three in a row at 500), a line of 300,000 characters (longer than a
CloudWatch event), non-ASCII text; printed in three bursts (several rounds of the log forwarding)."""
import argparse
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--lines", type=int, default=1200)
args = parser.parse_args()

print("BEGIN")
for i in range(args.lines):
    if i % 50 == 0:
        print()
    if i == 500:
        print("\n\n")
    if i == 700:
        print("L" * 300_000)
    print(f"line {i:05d} loss={1 / (i + 1):.6f} ✓ é")
    if i % 400 == 399:
        sys.stdout.flush()
        time.sleep(1.2)
print("END")
