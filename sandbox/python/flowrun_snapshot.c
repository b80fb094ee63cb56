/*
 * CPython entered as a WASI reactor, for flowrun's pre-initialised
 * interpreter (docs/sandbox.md, "Warm calls").
 *
 * flowrun runs flowrun_init once in a throw-away instance and saves its
 * linear memory and globals as a snapshot; every call then starts a fresh
 * instance from that image and runs flowrun_call, so it pays nothing for
 * CPython's start-up and sees nothing of other calls.
 *
 * Built as a reactor (-mexec-model=reactor): a command's exports would run
 * the C constructors again on every entry, and _initialize runs them once,
 * before the snapshot.
 */
#include "Python.h"

static PyObject *harness_main;

/*
 * flowrun_init starts CPython as `python3.13 -S -B -E -c ...` would (no
 * site, no bytecode written, no environment) and runs the Python read from
 * stdin as the module flowrun_harness: the harness, then whatever else the
 * host wants done before the snapshot (importing numpy, say), which is
 * kept on the host's side so that changing it needs no relink. It returns
 * 0 on success; on failure the reason is on stderr.
 */
__attribute__((export_name("flowrun_init"))) int flowrun_init(void) {
    static char *argv[] = {"python3.13", "-S", "-B", "-E", "-c", "pass"};
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.parse_argv = 1;
    PyStatus status = PyConfig_SetBytesArgv(&config, 6, argv);
    if (!PyStatus_Exception(status)) {
        status = Py_InitializeFromConfig(&config);
    }
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        fprintf(stderr, "flowrun_init: %s: %s\n", status.func ? status.func : "Py_InitializeFromConfig",
                status.err_msg ? status.err_msg : "failed");
        return 1;
    }
    /* Read with os.read, not sys.stdin, so that sys.stdin's buffers are
     * untouched when a call reads its request. */
    if (PyRun_SimpleString(
            "import os, sys, types\n"
            "def _load():\n"
            "    chunks = []\n"
            "    while True:\n"
            "        b = os.read(0, 1 << 16)\n"
            "        if not b:\n"
            "            break\n"
            "        chunks.append(b)\n"
            "    m = types.ModuleType('flowrun_harness')\n"
            "    sys.modules['flowrun_harness'] = m\n"
            "    exec(compile(b''.join(chunks), '<harness>', 'exec'), m.__dict__)\n"
            "_load()\n"
            "del _load, os, sys, types\n") != 0) {
        return 1;
    }
    PyObject *mod = PyImport_ImportModule("flowrun_harness");
    if (mod == NULL) {
        PyErr_Print();
        return 1;
    }
    harness_main = PyObject_GetAttrString(mod, "_main");
    Py_DECREF(mod);
    if (harness_main == NULL) {
        PyErr_Print();
        return 1;
    }
    return 0;
}

/*
 * flowrun_call runs one request from stdin, as the harness does when run as
 * a command, and writes its result to stdout.
 */
__attribute__((export_name("flowrun_call"))) int flowrun_call(void) {
    PyObject *r = PyObject_CallNoArgs(harness_main);
    if (r == NULL) {
        PyErr_Print();
        return 1;
    }
    Py_DECREF(r);
    return 0;
}
