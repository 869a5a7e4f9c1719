/* cmd_script.c - the scripting commands: EVAL, EVALSHA, EVAL_RO,
 * EVALSHA_RO, SCRIPT LOAD/EXISTS/FLUSH/KILL, FCALL, FCALL_RO and FUNCTION
 * LOAD/FLUSH/DELETE/KILL/LIST. Thin handlers over the engine (script.h);
 * cmd_dispatch has routed the declared keys (numkeys at argv[2]) already:
 * -CROSSSLOT, -MOVED, or held while a move fences their partition. */
#include "node/script.h"

void cmd_eval(cmd_ctx *x) {
    script_eval(x, 0, 0);
}
void cmd_evalsha(cmd_ctx *x) {
    script_eval(x, 1, 0);
}
void cmd_eval_ro(cmd_ctx *x) {
    script_eval(x, 0, 1);
}
void cmd_evalsha_ro(cmd_ctx *x) {
    script_eval(x, 1, 1);
}
void cmd_fcall(cmd_ctx *x) {
    script_fcall(x, 0);
}
void cmd_fcall_ro(cmd_ctx *x) {
    script_fcall(x, 1);
}

void cmd_script(cmd_ctx *x) {
    reply_err(x, "ERR wrong number of arguments for 'script' command");
}
void cmd_script_load(cmd_ctx *x) {
    script_load(x);
}
void cmd_script_exists(cmd_ctx *x) {
    script_exists(x);
}
void cmd_script_flush(cmd_ctx *x) {
    script_flush(x);
}
void cmd_script_kill(cmd_ctx *x) {
    script_kill(x, 1);
}

void cmd_function_load(cmd_ctx *x) {
    script_function_load(x);
}
void cmd_function_flush(cmd_ctx *x) {
    script_function_flush(x);
}
void cmd_function_delete(cmd_ctx *x) {
    script_function_delete(x);
}
void cmd_function_kill(cmd_ctx *x) {
    script_kill(x, 0);
}
void cmd_function_list(cmd_ctx *x) {
    script_function_list(x);
}
