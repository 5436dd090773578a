;;;; formats.lisp - the number formats of GGUF files, seen from Lisp.
;;;;
;;;; Scalar conversions between single-floats and the bit patterns of IEEE
;;;; binary16 (f16) and bfloat16 (bf16), bit-exact with ggml: f16 rounds to
;;;; nearest even (overflow to infinity), bf16 rounds to nearest even on the
;;;; top 16 bits with NaN made quiet.  The arithmetic is C's (gguf/numfmt.c).

(in-package "RONTOLISP")

(deftype f16-bits () '(unsigned-byte 16))

(defun check-single-float-arg (fn x)
  (unless (typep x 'real)
    (rontolisp-error fn "expected a real number, found ~S" x))
  (if (typep x 'double-float)
      (%double-to-single x)
      (coerce x 'single-float)))

(defun f16-bits (x)
  "The IEEE binary16 bit pattern (an integer below 65536) nearest to the real
X: X is first made a single-float (a double-float by C's cast, round to
nearest even), then rounded to binary16 with ties to even; values beyond
65504 round to infinity, NaN stays NaN."
  (%f16-bits (check-single-float-arg 'f16-bits x)))

(defun f16-value (bits)
  "The single-float whose binary16 bit pattern is BITS (0 to 65535); exact."
  (check-type bits f16-bits)
  (%f16-value bits))

(defun bf16-bits (x)
  "The bfloat16 bit pattern of the real X by ggml's rule: round to nearest
even on the top 16 bits of the single-float, NaN made quiet."
  (%bf16-bits (check-single-float-arg 'bf16-bits x)))

(defun bf16-value (bits)
  "The single-float whose bfloat16 bit pattern is BITS (0 to 65535); exact."
  (check-type bits f16-bits)
  (%bf16-value bits))
