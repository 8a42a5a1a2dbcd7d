"""Run a script against /tmp/basepkg (main's code): drop the editable finder first."""
import sys, runpy
sys.meta_path[:] = [f for f in sys.meta_path if 'ditable' not in getattr(f, '__name__', type(f).__name__)]
sys.path.insert(0, '/tmp/basepkg')
script = sys.argv[1]; sys.argv = sys.argv[1:]
runpy.run_path(script, run_name='__main__')
