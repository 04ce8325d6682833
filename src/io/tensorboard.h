/* tensorboard.h: TensorBoard event files, written without TensorFlow or a
 * protobuf library, so `tensorboard --logdir DIR` shows a run's curves while
 * it trains.
 *
 * A file is a sequence of TFRecords (length, masked CRC-32C of the length,
 * the bytes, masked CRC-32C of the bytes), each holding one protobuf Event:
 * the first names the format (file_version "brain.Event:2"); then a scalar is
 * an Event with a Summary of one Value {tag, simple_value}; a text is a Value
 * carrying a string tensor and the metadata plugin_name "text", as
 * TensorBoard's own text summary writes it. The messages are encoded by hand:
 * only the few fields above are ever written.
 *
 * A writer makes DIR (and its parents) if missing and opens a new file
 * events.out.tfevents.<unix seconds>.<hostname>.<pid>.pipetrain there. The
 * seconds in the name are later than those of any event file already in DIR,
 * so TensorBoard, which reads a folder's files in name order, reads a resumed
 * run after the run it continues. Callers: the trainer (its main process). */
#ifndef PT_IO_TENSORBOARD_H
#define PT_IO_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct pt_tb_writer pt_tb_writer;

/* CRC-32C (Castagnoli) of data[0..n), and the masked form TFRecords store. */
uint32_t pt_crc32c(const void *data, size_t n);
uint32_t pt_crc32c_masked(const void *data, size_t n);
/* The 12 bytes before a record's n bytes (length, masked CRC of the length)
 * and the 4 after them (masked CRC of the bytes). */
void pt_tfrecord_frame(const void *data, uint64_t n, uint8_t header[12], uint8_t footer[4]);

/* Opens a new event file in dir and writes its file_version event. PT_EIO
 * (with a message naming the path) if the folder or file cannot be made. */
int pt_tb_open(const char *dir, pt_tb_writer **out);
/* The path of the file being written. */
const char *pt_tb_path(const pt_tb_writer *w);
/* One scalar point of the curve tag. */
int pt_tb_scalar(pt_tb_writer *w, const char *tag, int64_t step, float value);
/* A text (markdown, as TensorBoard's text tab shows it) under tag. */
int pt_tb_text(pt_tb_writer *w, const char *tag, int64_t step, const char *text);
/* A SessionLog START at step: TensorBoard drops the points of earlier files
 * at this step and after (a run that went on past the checkpoint a resumed
 * run starts from), so no step is shown twice. */
int pt_tb_restart(pt_tb_writer *w, int64_t step);
/* Hands what was written to the operating system, for a live TensorBoard. */
int pt_tb_flush(pt_tb_writer *w);
/* Flushes and closes; PT_EIO if the last data could not be written. NULL is
 * ok. */
int pt_tb_close(pt_tb_writer *w);

#endif
