"""min-of-N process time of the tracker phase (LoggedTracker set-up, then finish on the row's pickled log). usage: tm.py N"""
import sys, time, gc
N = int(sys.argv[1]) if len(sys.argv) > 1 else 5
sys.argv = [sys.argv[0], __import__("os").path.join(__import__("os").path.dirname(__import__("os").path.abspath(__file__)), "log.pkl"), "none"]
exec(open(__import__("os").path.join(__import__("os").path.dirname(__import__("os").path.abspath(__file__)), "ph.py")).read())
su, fi = 1e9, 1e9
for _ in range(N):
    gc.disable()
    a = time.process_time(); t = H.LoggedTracker(s, table); b = time.process_time()
    t._log, t._ends = list(log), list(ends)
    t.finish(); c = time.process_time()
    assert t.hazards == []
    su, fi = min(su, b - a), min(fi, c - b)
    del t
print(f"set-up {su*1e3:.1f} ms, verdict {fi*1e3:.1f} ms")
