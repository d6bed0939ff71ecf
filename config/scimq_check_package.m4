dnl SPDX-License-Identifier: BSD-3-Clause
dnl
dnl SCIMQ_CHECK_PACKAGE(option, VAR, pkg-module, headers, library, symbol,
dnl                     required|optional, debian-package)
dnl
dnl Finds one external package and records its flags in SCIMQ_<VAR>_CPPFLAGS,
dnl SCIMQ_<VAR>_LDFLAGS and SCIMQ_<VAR>_LIBS, never in the global CPPFLAGS or
dnl LIBS, so each target links only what it uses.  Order of search:
dnl   --with-<option>=DIR   DIR/include and DIR/lib64 or DIR/lib (or
dnl                         --with-<option>-libdir=DIR), checked by compiling
dnl   pkg-config <module>   when no directory was given (and a module is named)
dnl   default paths         plain header + library check
dnl headers is one header or a space-separated list; all must be usable.
dnl A header-only package (uthash) gives no library: then symbol is a macro
dnl its headers must define, the check compiles instead of linking, and
dnl there is no --with-<option>-libdir.  Otherwise symbol is a function of
dnl the library, and the check links a program taking its address.
dnl A package that the user asked for (--with-<option>[=DIR]) or that is
dnl "required" is a hard error when it cannot be found, naming the Debian
dnl package; --without-<option> turns a package off.  Sets HAVE_<VAR> (AM
dnl conditional and config.h define) and scimq_have_<option>=yes|no.
AC_DEFUN([SCIMQ_CHECK_PACKAGE], [
    AC_ARG_WITH([$1],
        [AS_HELP_STRING([--with-$1@<:@=DIR@:>@],
            [use $1 (installed under DIR); default: $7])])
    m4_ifnblank([$5], [AC_ARG_WITH([$1-libdir],
        [AS_HELP_STRING([--with-$1-libdir=DIR],
            [directory holding the $1 library])])])

    SCIMQ_$2_CPPFLAGS=
    SCIMQ_$2_LDFLAGS=
    SCIMQ_$2_LIBS=
    scimq_have_$1=no
    scimq_want_$1="$7"
    AS_CASE(["$with_$1"],
        [no], [scimq_want_$1=no],
        [yes], [scimq_want_$1=requested],
        [""], [],
        [scimq_want_$1=requested])

    AS_IF([test "$scimq_want_$1" != "no"], [
        AS_IF([test -n "$with_$1" && test "$with_$1" != "yes"], [
            SCIMQ_$2_CPPFLAGS="-I$with_$1/include"
            m4_ifnblank([$5], [
            AS_IF([test -n "$with_$1_libdir"],
                [SCIMQ_$2_LDFLAGS="-L$with_$1_libdir"],
                [test -d "$with_$1/lib64"],
                [SCIMQ_$2_LDFLAGS="-L$with_$1/lib64 -Wl,-rpath,$with_$1/lib64"],
                [SCIMQ_$2_LDFLAGS="-L$with_$1/lib -Wl,-rpath,$with_$1/lib"])
            SCIMQ_$2_LIBS="-l$5"])
        ], [
            m4_ifnblank([$3], [
            PKG_CHECK_MODULES([SCIMQ_PC_$2], [$3],
                [SCIMQ_$2_CPPFLAGS="$SCIMQ_PC_$2_CFLAGS"
                 SCIMQ_$2_LIBS="$SCIMQ_PC_$2_LIBS"],
                [m4_ifnblank([$5], [SCIMQ_$2_LIBS="-l$5"])])],
            [m4_ifnblank([$5], [SCIMQ_$2_LIBS="-l$5"])])
            m4_ifnblank([$5], [
            AS_IF([test -n "$with_$1_libdir"],
                [SCIMQ_$2_LDFLAGS="-L$with_$1_libdir"])])
        ])

        dnl Whatever the source of the flags, prove that they work.
        scimq_save_CPPFLAGS="$CPPFLAGS"
        scimq_save_LDFLAGS="$LDFLAGS"
        scimq_save_LIBS="$LIBS"
        CPPFLAGS="$CPPFLAGS $SCIMQ_$2_CPPFLAGS"
        LDFLAGS="$LDFLAGS $SCIMQ_$2_LDFLAGS"
        LIBS="$SCIMQ_$2_LIBS $LIBS"
        m4_ifblank([$5], [
        AC_MSG_CHECKING([for $1 ($4, $6)])
        AC_COMPILE_IFELSE([AC_LANG_PROGRAM(
                [m4_map_args_w([$4], [[#include <]], [[>]], [
])], [[
#ifndef $6
#error "$6 is not defined"
#endif
]])],
            [scimq_have_$1=yes], [scimq_have_$1=no])
        ], [
        AC_MSG_CHECKING([for $1 ($4, $6)])
        AC_LINK_IFELSE([AC_LANG_PROGRAM(
                [m4_map_args_w([$4], [[#include <]], [[>]], [
])], [[void *p = (void *) &$6; (void) p;]])],
            [scimq_have_$1=yes], [scimq_have_$1=no])
        ])
        AC_MSG_RESULT([$scimq_have_$1])
        CPPFLAGS="$scimq_save_CPPFLAGS"
        LDFLAGS="$scimq_save_LDFLAGS"
        LIBS="$scimq_save_LIBS"

        AS_IF([test "$scimq_have_$1" = "no"], [
            SCIMQ_$2_CPPFLAGS=
            SCIMQ_$2_LDFLAGS=
            SCIMQ_$2_LIBS=
            AS_IF([test "$scimq_want_$1" != "optional"],
                [AC_MSG_ERROR([$1 was $scimq_want_$1 but m4_map_args_w([$4], [<], [>], [ ])m4_ifnblank([$5], [ / -l$5]) could not be used.
Install its development package (Debian: $8) or point to it with --with-$1=DIR.])])
        ])
    ])

    AS_IF([test "$scimq_have_$1" = "yes"],
        [AC_DEFINE([HAVE_$2], [1], [Define to 1 if $1 is available.])])
    AM_CONDITIONAL([HAVE_$2], [test "$scimq_have_$1" = "yes"])
    AC_SUBST([SCIMQ_$2_CPPFLAGS])
    AC_SUBST([SCIMQ_$2_LDFLAGS])
    AC_SUBST([SCIMQ_$2_LIBS])
])
