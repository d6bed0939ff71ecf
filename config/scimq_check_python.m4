dnl SPDX-License-Identifier: BSD-3-Clause
dnl
dnl SCIMQ_CHECK_PYTHON
dnl
dnl The Python binding (python/, package scimq) and its pytest suite.  Built
dnl unless --disable-python: a missing part stops configure and names its
dnl Debian package, so the tests never vanish silently.  The interpreter is
dnl the first python3 on PATH (or $PYTHON) that imports cffi (the binding is
dnl generated with it), pytest and numpy (its tests): a private interpreter
dnl earlier on PATH without them is passed over.  The extension is compiled
dnl for that interpreter, so its headers (Python.h) must be there too.
dnl Sets PYTHON, pythondir, pyexecdir (AM_PATH_PYTHON), PYTHON_CPPFLAGS and
dnl the AM_CONDITIONAL HAVE_PYTHON.
AC_DEFUN([SCIMQ_CHECK_PYTHON], [
    AC_ARG_ENABLE([python],
        [AS_HELP_STRING([--disable-python],
            [do not build the Python binding (python/) and its tests])],
        [], [enable_python=yes])
    PYTHON_CPPFLAGS=
    scimq_have_python=no
    AS_IF([test "$enable_python" != no], [
        AC_CACHE_CHECK([for a python3 with cffi, pytest and numpy],
            [ac_cv_path_PYTHON],
            [AC_PATH_PROGS_FEATURE_CHECK([PYTHON], [python3],
                [AS_IF(["$ac_path_PYTHON" -c 'import cffi, pytest, numpy' \
                            > /dev/null 2>&1],
                    [ac_cv_path_PYTHON=$ac_path_PYTHON
                     ac_path_PYTHON_found=:])],
                [AC_MSG_ERROR([no python3 imports cffi and pytest and numpy (Debian: python3-cffi python3-pytest python3-numpy); or configure --disable-python])])])
        PYTHON=$ac_cv_path_PYTHON
    ], [PYTHON=:])
    dnl Where the interpreter itself installs for this prefix: Debian's
    dnl python3 searches /usr/local/lib/python3.X/dist-packages, not the
    dnl site-packages that automake would pick, so "make install" into
    dnl /usr/local would leave "import scimq" failing.  When the prefix is
    dnl the one of the interpreter's default scheme (its "data" path), its
    dnl platlib is used; any other prefix (or a directory given in the
    dnl environment) keeps automake's.
    AS_IF([test "$PYTHON" != :], [
        scimq_py_prefix=$prefix
        test "x$scimq_py_prefix" = xNONE && scimq_py_prefix=$ac_default_prefix
        scimq_py_data=`$PYTHON -c 'import sysconfig; print(sysconfig.get_path("data"))'`
        scimq_py_platlib=`$PYTHON -c 'import sysconfig; print(sysconfig.get_path("platlib"))'`
        test "$scimq_py_data" = "$scimq_py_prefix" || scimq_py_platlib=
        case $scimq_py_platlib in
        "$scimq_py_prefix"/*)
            scimq_py_rel=${scimq_py_platlib#"$scimq_py_prefix"}
            test -n "$am_cv_python_pythondir" ||
                am_cv_python_pythondir="\${PYTHON_PREFIX}$scimq_py_rel"
            test -n "$am_cv_python_pyexecdir" ||
                am_cv_python_pyexecdir="\${PYTHON_EXEC_PREFIX}$scimq_py_rel"
            ;;
        esac
    ])
    dnl At the top level: its Python code does not survive another quoting.
    AM_PATH_PYTHON([3.7], [], [:])
    AS_IF([test "$PYTHON" != :], [
        scimq_py_include=`$PYTHON -c 'import sysconfig; print(sysconfig.get_path("include"))'`
        AC_MSG_CHECKING([for Python.h of $PYTHON])
        AS_IF([test -f "$scimq_py_include/Python.h"],
            [AC_MSG_RESULT([$scimq_py_include])],
            [AC_MSG_RESULT([no])
             AC_MSG_ERROR([Python.h not found in $scimq_py_include (Debian: python3-dev), or configure --disable-python])])
        PYTHON_CPPFLAGS="-I$scimq_py_include"
        scimq_have_python=yes
    ])
    AC_SUBST([PYTHON_CPPFLAGS])
    AM_CONDITIONAL([HAVE_PYTHON], [test "$scimq_have_python" = yes])
])
