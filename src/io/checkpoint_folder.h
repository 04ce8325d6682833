/* checkpoint_folder.h: where a checkpoint set lives on disk, for
 * checkpoint_set.c: which existing paths a save may replace, the staging
 * folder beside the destination and what killed saves leave there, and
 * the swap that puts a finished set in place. */
#ifndef PT_IO_CHECKPOINT_FOLDER_H
#define PT_IO_CHECKPOINT_FOLDER_H

#include "io/checkpoint_format.h"

/* PT_OK when a save may put its result under dest: dest does not exist, or
 * is a regular file (a file dest), or a folder that is empty or holds only
 * a set's files (a set dest). Anything else is refused, naming it. */
int pt_ckpt_check_dest(const char *dest);
/* Puts the finished set in staging under dest at once, and removes the set
 * it replaces. */
int pt_ckpt_swap_in(const char *staging, const char *dest);
/* Removes a folder and what it holds (files only; a set has no folders). */
void pt_ckpt_remove_tree(const char *path);

#endif
