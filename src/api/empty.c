/* The shared library's own translation unit; everything else comes from tributary_core. */
typedef int trib_shared_library_anchor;
