;;;; progress.lisp - the progress a long job shows on stderr: one line
;;;; rewritten in place on a terminal, a plain line every few seconds
;;;; otherwise.  The model's calibration and the jobs of the command line
;;;; share it.

(in-package "RONTOLISP")

(defvar *progress* t
  "True when PROGRESS-REPORTER may show progress: a command that reports
its own (export: one line per model) binds it to NIL around the work.")

(defvar *progress-interval* 5
  "The least number of seconds between two progress lines when stderr is
not a terminal (a log, a pipe); the environment variable
RL_PROGRESS_SECONDS, a whole number, overrides it (0: a line per step).")

(defun progress-interval ()
  "The seconds between two progress lines: RL_PROGRESS_SECONDS when it is
a whole number of seconds, else *PROGRESS-INTERVAL*."
  (let* ((text (ext:getenv "RL_PROGRESS_SECONDS"))
         (n (and text (parse-integer text :junk-allowed t))))
    (if (and n (>= n 0)) n *progress-interval*)))

(defun progress-lines (show)
  "A function of (done item) that calls SHOW, which writes one line on
stderr, at most once every PROGRESS-INTERVAL seconds: the progress a
command shows when stderr is not a terminal."
  (let ((interval (* (progress-interval) internal-time-units-per-second))
        (last (get-internal-real-time)))
    (lambda (done item)
      (let ((now (get-internal-real-time)))
        (when (>= (- now last) interval)
          (setf last now)
          (funcall show done item)
          (finish-output *error-output*))))))

(defun progress-reporter (total)
  "A function of (done name) that shows progress on stderr when *PROGRESS*
is true: on a terminal one line rewritten in place, otherwise a plain
line at most every PROGRESS-INTERVAL seconds."
  (cond ((not (and *progress* (plusp total)))
         (lambda (done name) (declare (ignore done name))))
        ((/= 0 (%isatty 2))
         (lambda (done name)
           (format *error-output* "~C[~D/~D] ~A~C[K" #\Return done total name #\Esc)
           (when (= done total) (terpri *error-output*))
           (finish-output *error-output*)))
        (t (progress-lines (lambda (done name)
                             (format *error-output* "[~D/~D] ~A~%" done total name))))))
