;;;; test-threads.lisp - the limit on live Lisp threads (lisp/base/threads.lisp):
;;;; more threads than ECL's first vector of 256 start and end (ECL alone
;;;; spins forever at the 256th), and one beyond *THREAD-LIMIT* is refused
;;;; with THREAD-LIMIT-ERROR.

(in-package "RONTOLISP-TESTS")

(def-suite threads :in all :description "The limit on live Lisp threads.")
(in-suite threads)

(test threads-beyond-256-start-and-end
  ;; In a child with a deadline: ECL alone never returns from the 256th.
  (let ((script (write-file-string (tmp-path "threads.lisp") "
(let* ((gate (mp:make-semaphore :count 0))
       (threads (loop repeat 300
                      collect (mp:process-run-function \"waiter\"
                                                       (lambda () (mp:wait-on-semaphore gate) 1)))))
  (format t \"started ~D~%\" (length threads))
  (mp:signal-semaphore gate 300)
  (format t \"joined ~D~%\" (count 1 (mapcar #'mp:process-join threads))))
")))
    (unwind-protect
         (multiple-value-bind (code out err) (sh "timeout -s KILL 120 \"$0\" script \"$1\"" script)
           (is (eql 0 code) "exit ~S: ~A" code err)
           (is (contains out "started 300"))
           (is (contains out "joined 300")))
      (ignore-errors (delete-file script)))))

(test threads-beyond-the-limit-are-refused
  (let* ((gate (mp:make-semaphore :count 0))
         (live (length (mp:all-processes)))
         (threads '())
         (refused nil))
    (let ((rontolisp:*thread-limit* (+ live 2)))
      (unwind-protect
           (progn
             (dotimes (i 2)
               (push (mp:process-run-function "waiter" (lambda () (mp:wait-on-semaphore gate)))
                     threads))
             (setf refused
                   (handler-case (mp:process-run-function "one too many" (lambda () nil))
                     (rontolisp:thread-limit-error (e) e)))
             ;; MP:MAKE-PROCESS then MP:PROCESS-ENABLE is refused the same way.
             (is (typep (handler-case (let ((p (mp:make-process :name "enabled")))
                                          (mp:process-preset p (lambda () nil))
                                          (mp:process-enable p))
                          (rontolisp:thread-limit-error (e) e))
                        'rontolisp:thread-limit-error)))
        (mp:signal-semaphore gate 2)
        (mapc #'mp:process-join threads)))
    (is (typep refused 'rontolisp:thread-limit-error) "answered ~S" refused)
    (when (typep refused 'rontolisp:thread-limit-error)
      (is (eql (+ live 2) (rontolisp:thread-limit-error-limit refused)))
      (is (contains (princ-to-string refused) "\"one too many\"")))
    ;; Within the limit again once they ended.
    (is (eql 7 (mp:process-join (mp:process-run-function "after" (lambda () 7)))))))
