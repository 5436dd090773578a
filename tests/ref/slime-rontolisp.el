;;; slime-rontolisp.el --- SLIME itself against a running `rontolisp swank'  -*- lexical-binding: t -*-

;; Run by tests/lisp/test-swank.lisp as
;;   emacs --batch -Q -l tests/ref/slime-rontolisp.el PORT
;; with Debian's SLIME (package slime, or elpa-slime).  It connects to
;; 127.0.0.1:PORT with `slime-connect', then, as a user would:
;;  - M-. (`slime-edit-definition') on rontolisp:quantize;
;;  - `slime-inspect' of a small quantized matrix;
;;  - evaluates a call that signals an error, reads SLIME's debugger
;;    buffer (sldb) and asks where the frame of rontolisp:quantize is;
;; and prints what it found on standard output, one fact a line
;; ("definition-file: ...", "definition-line: ...", "inspector: ...",
;; "frame: ...", "frame-source-line: ..."), then "slime-done".  The test decides what is right.
;; Every wait has a deadline: past it the line "slime-timeout: WHAT" is
;; printed and Emacs exits with code 2.

(let ((dir (car (last (file-expand-wildcards "/usr/share/emacs/site-lisp/elpa/slime-*")))))
  (unless dir
    (princ "slime-absent: no /usr/share/emacs/site-lisp/elpa/slime-*\n")
    (kill-emacs 3))
  (dolist (d (list dir (expand-file-name "lib" dir) (expand-file-name "contrib" dir)))
    (add-to-list 'load-path d)))

(require 'slime)

(defvar rontolisp-port (string-to-number (car command-line-args-left)))
(setq command-line-args-left nil)

(defun rontolisp-say (fmt &rest args)
  "Print one line made by FMT and ARGS on standard output."
  (princ (concat (apply #'format fmt args) "\n")))

(defun rontolisp-wait (what predicate &optional seconds)
  "Process SLIME's network traffic until PREDICATE answers non-nil (its
value is answered); past SECONDS (30) say so and exit with code 2."
  (let ((deadline (+ (float-time) (or seconds 30)))
        (value nil))
    (while (not (setq value (funcall predicate)))
      (when (> (float-time) deadline)
        (rontolisp-say "slime-timeout: %s" what)
        (kill-emacs 2))
      (accept-process-output nil 0.05))
    value))

(defun rontolisp-one-line (text)
  "TEXT with its runs of blanks and newlines made single spaces."
  (replace-regexp-in-string "[ \t\n]+" " " text))

;; A version mismatch would ask y-or-n-p, which reads stdin in batch mode.
(setq slime-protocol-version 'ignore)

;;; Connect.
(slime-connect "127.0.0.1" rontolisp-port)
(rontolisp-wait "connection"
                (lambda () (and (slime-connected-p)
                                (slime-connection-name (slime-connection)))))
(rontolisp-say "connected: %s" (slime-eval '(cl:package-name cl:*package*)))

;;; M-. on rontolisp:quantize, from a scratch buffer.
(with-current-buffer (get-buffer-create "*rontolisp-test*")
  (condition-case err
      (progn
        (slime-edit-definition "rontolisp:quantize")
        (rontolisp-say "definition-file: %s" (or buffer-file-name
                                                 (buffer-file-name (window-buffer))
                                                 (buffer-file-name (current-buffer))))
        (rontolisp-say "definition-exists: %s"
                       (if (and buffer-file-name (file-exists-p buffer-file-name)) "yes" "no"))
        (rontolisp-say "definition-line: %s"
                       (buffer-substring-no-properties (point) (line-end-position))))
    (error (rontolisp-say "definition-error: %s" (error-message-string err)))))

;;; The inspector on a quantized matrix.
(slime-inspect "(rontolisp:quantize (make-array '(4 32) :element-type 'single-float :initial-element 0.5) :q8-0)")
(rontolisp-wait "inspector"
                (lambda ()
                  (let ((b (get-buffer (slime-buffer-name :inspector))))
                    (and b (with-current-buffer b
                                 (save-excursion
                                   (goto-char (point-min))
                                   (search-forward "-----" nil t)))))))
(with-current-buffer (slime-buffer-name :inspector)
  (rontolisp-say "inspector: %s" (rontolisp-one-line (buffer-substring-no-properties
                                                      (point-min) (point-max)))))

;;; An error: SLIME's debugger and its backtrace.
(slime-eval-async '(swank:interactive-eval
                    "(rontolisp:quantize (make-array 3 :element-type 'single-float) :q8-0)"))
(let ((sldb (rontolisp-wait "debugger"
                            (lambda ()
                              (seq-find (lambda (b)
                                          (and (string-prefix-p "*sldb" (buffer-name b))
                                               (with-current-buffer b
                                                 (save-excursion
                                                   (goto-char (point-min))
                                                   (search-forward "Backtrace:" nil t)))))
                                        (buffer-list))))))
  (with-current-buffer sldb
    (goto-char (point-min))
    (rontolisp-say "condition: %s" (rontolisp-one-line
                                    (buffer-substring-no-properties (point) (line-end-position))))
    (search-forward "Backtrace:")
    (forward-line 1)
    (while (not (eobp))
      (let ((line (string-trim (buffer-substring-no-properties (point) (line-end-position)))))
        (unless (string= line "")
          (rontolisp-say "frame: %s" line)))
      (forward-line 1))
    ;; `v' on the frame of rontolisp:quantize: where its source is.
    (goto-char (point-min))
    (search-forward "Backtrace:")
    (when (search-forward "RONTOLISP:QUANTIZE" nil t)
      (let ((location (slime-eval `(swank:frame-source-location ,(sldb-frame-number-at-point)))))
        (rontolisp-say "frame-source-file: %s" (cadr (assq :file (cdr location))))
        (rontolisp-say "frame-source-line: %s"
                       (condition-case err
                           (with-current-buffer (find-file-noselect (cadr (assq :file (cdr location))))
                             (goto-char (slime-location-offset location))
                             (buffer-substring-no-properties (point) (line-end-position)))
                         (error (format "%S %s" location (error-message-string err)))))))
    (sldb-quit)))

(slime-disconnect)
(rontolisp-say "slime-done")
(kill-emacs 0)

;;; slime-rontolisp.el ends here
