;;;; runtime.lisp - what every layer may ask of the running program: its
;;;; version, leaving it, the arguments of a script, and the knobs shared
;;;; with the C kernels (SIMD on or off, the number of threads).  The
;;;; command line that sets them is session/command-line.lisp.

(in-package "RONTOLISP")

(defparameter *version* "0.1.0")

(defvar *args* '()
  "The command-line arguments after the script's file name, as a list of
strings, while `rontolisp script FILE ARGS...' runs FILE.")

(defun version ()
  "The version of rontolisp and of the ECL it embeds, as a string."
  (format nil "rontolisp ~A (~A ~A)" *version*
          (lisp-implementation-type) (lisp-implementation-version)))

(defun exit (&optional (code 0))
  "Leave rontolisp with exit status CODE (an integer, default 0), unwinding
every dynamic extent on the way, so open files are closed and the standard
streams flushed."
  (check-type code (integer 0 255))
  (throw '%exit code))

;;; Knobs shared with the C kernels.

(defun simd ()
  "True when the kernels may use the CPU's SIMD paths (the default; the
command-line flag --no-simd turns them off).  Set with (setf (simd) nil)."
  (%simd))

(defun (setf simd) (on)
  (%set-simd (if on 1 0))
  on)

(defun threads ()
  "The number of threads the kernels split their work across (--threads N;
by default the machine's cores).  Set with (setf (threads) n)."
  (%threads))

(defun (setf threads) (n)
  ;; The C knob refuses a count outside 1 to its limit (a TYPE-ERROR whose
  ;; expected type names the limit), so the limit has one home.
  (%set-threads n)
  n)

(defun max-threads ()
  "The most threads the kernels can split their work across (the C
kernels' limit): what --threads, (setf threads) and bench accept."
  (%max-threads))

(defun simd-path ()
  "The name of the kernel path in use now, as a string: \"avx512vnni\",
\"avx512\", \"avx2\" or \"scalar\"."
  (%simd-path))
