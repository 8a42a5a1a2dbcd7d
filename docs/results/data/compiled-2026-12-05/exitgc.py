import gc, sys, time, runpy
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
t = time.process_time(); n = gc.collect(); print("final full collection", round(time.process_time() - t, 3), "s, freed", n)
