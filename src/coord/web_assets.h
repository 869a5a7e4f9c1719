/* web_assets.h - the dashboard's files, embedded in the binary at build time.
 *
 * CMake (cmake/embed.cmake) turns web/index.html, web/dash.js, web/dash.css
 * and the charting library (Debian's libjs-dygraphs: dygraph.min.js and
 * dygraph.min.css) into a generated C source defining this table, so the
 * coordinator serves the dashboard with no file and no network at run time.
 * The data never changes: any thread may read it.
 */
#ifndef KEEL_WEB_ASSETS_H
#define KEEL_WEB_ASSETS_H

#include <stddef.h>

typedef struct web_asset {
    const char *path;         /* URL path, e.g. "/dash.js" */
    const char *content_type; /* e.g. "text/javascript; charset=utf-8" */
    const unsigned char *data;
    size_t len;
} web_asset;

extern const web_asset web_assets[];
extern const size_t web_nassets;

#endif
