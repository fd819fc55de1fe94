/* The CUDA_INJECTION64_PATH library `cutune capture` builds for programs that are not Python.
 *
 * The CUDA driver calls InitializeInjection() during cuInit. It starts an embedded Python (the libpython named
 * by CUTUNE_CAPTURE_LIBPYTHON, loaded with dlopen: no Python headers are needed to build this) and runs the same
 * launch recorder a Python program gets through sitecustomize (cutune_intercept.py, in
 * CUTUNE_CAPTURE_INJECT_DIR), then hands the interpreter's lock back so CUPTI's callbacks can take it. At exit
 * the recorder writes its counts once more: an embedded interpreter never runs Python's own exit handlers. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*initialize_fn)(int);
typedef int (*is_initialized_fn)(void);
typedef int (*run_fn)(const char *);
typedef int (*gil_ensure_fn)(void);
typedef void (*gil_release_fn)(int);
typedef void *(*save_thread_fn)(void);

static run_fn run;
static gil_ensure_fn gil_ensure;
static gil_release_fn gil_release;

static void flush_at_exit(void) {
  int state = gil_ensure();
  run("import cutune_intercept\ncutune_intercept.flush()\n");
  gil_release(state);
}

int InitializeInjection(void) {
  const char *library = getenv("CUTUNE_CAPTURE_LIBPYTHON");
  if (library == NULL || getenv("CUTUNE_CAPTURE_INJECT_DIR") == NULL) {
    return 0;
  }
  /* a Python process (a child of the program, say) has an interpreter already: never start a second one */
  is_initialized_fn running = (is_initialized_fn)dlsym(RTLD_DEFAULT, "Py_IsInitialized");
  if (running != NULL && running()) {
    return 1;
  }
  void *python = dlopen(library, RTLD_NOW | RTLD_GLOBAL);
  if (python == NULL) {
    fprintf(stderr, "cutune capture: cannot load %s: %s\n", library, dlerror());
    return 0;
  }
  is_initialized_fn is_initialized = (is_initialized_fn)dlsym(python, "Py_IsInitialized");
  initialize_fn initialize = (initialize_fn)dlsym(python, "Py_InitializeEx");
  save_thread_fn save_thread = (save_thread_fn)dlsym(python, "PyEval_SaveThread");
  run = (run_fn)dlsym(python, "PyRun_SimpleString");
  gil_ensure = (gil_ensure_fn)dlsym(python, "PyGILState_Ensure");
  gil_release = (gil_release_fn)dlsym(python, "PyGILState_Release");
  if (!is_initialized || !initialize || !save_thread || !run || !gil_ensure || !gil_release) {
    fprintf(stderr, "cutune capture: %s is not a Python library\n", library);
    return 0;
  }
  if (is_initialized()) {
    return 1; /* a Python program: its sitecustomize records */
  }
  initialize(0); /* 0: the program keeps its own signal handlers */
  run("import os, sys\n"
      "sys.path.insert(0, os.environ['CUTUNE_CAPTURE_INJECT_DIR'])\n"
      "import cutune_intercept\n"
      "cutune_intercept.start()\n");
  save_thread();
  atexit(flush_at_exit);
  return 1;
}
