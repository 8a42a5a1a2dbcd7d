"""A small line timer: process time per line of chosen functions (nested comprehensions counted in their line)."""
import sys, time, linecache, collections
class LP:
    def __init__(self, *funcs):
        self.codes = {f.__code__ for f in funcs}
        self.t = collections.defaultdict(float); self.n = collections.Counter()
    def _global(self, frame, event, arg):
        if frame.f_code in self.codes:
            frame.f_trace_lines = True
            self.last = {}
            return self._local
        return None
    def _local(self, frame, event, arg):
        now = time.perf_counter()
        key = id(frame)
        prev = self.last.get(key)
        if prev is not None:
            self.t[(frame.f_code, prev[0])] += now - prev[1]; self.n[(frame.f_code, prev[0])] += 1
        if event == 'return':
            self.last.pop(key, None)
        else:
            self.last[key] = (frame.f_lineno, time.perf_counter())
        return self._local
    def __enter__(self):
        sys.settrace(self._global); return self
    def __exit__(self, *a):
        sys.settrace(None)
    def report(self, top=25):
        items = sorted(self.t.items(), key=lambda kv: -kv[1])[:top]
        for (code, line), v in items:
            src = linecache.getline(code.co_filename, line).strip()[:110]
            print(f"{v*1000:8.1f} ms {self.n[(code, line)]:6d} {code.co_name}:{line} {src}")
