;;;; threads.lisp - a limit on live Lisp threads.  ECL 21.2.1 lists its
;;;; threads in a vector of 256 slots that it cannot grow (the grown copy
;;;; has no fill pointer, so it is grown again forever: the 256th thread
;;;; spins at 100% CPU until memory runs out).  MP:PROCESS-RUN-FUNCTION and
;;;; MP:PROCESS-ENABLE are wrapped here: before a thread starts, the vector
;;;; is made large enough once (%RESERVE-THREAD-SLOTS, prims/ecl/threads.c)
;;;; and a thread beyond *THREAD-LIMIT* is refused with THREAD-LIMIT-ERROR.
;;;; Swank's threads (lisp/session/swank.lisp) are made the same way.
;;;;
;;;; Before a thread starts, every special variable is also given its slot
;;;; in ECL's per-thread tables of bindings (GIVE-SPECIALS-THEIR-SLOTS):
;;;; ECL hands a slot out on a variable's first binding, unsynchronized, and
;;;; two threads binding a variable for the first time at once could each
;;;; take one, one of them then reading the global value inside its own LET.

(in-package "RONTOLISP")

(defparameter *thread-limit* 1000
  "The most Lisp threads alive at once (the main thread included): starting
one more signals THREAD-LIMIT-ERROR.")

(defconstant +thread-slack+ 64
  "Slots of ECL's thread vector kept beyond *THREAD-LIMIT*, for threads
started by code that calls ECL's C functions without the wrappers below.")

(defvar *thread-lock* (mp:make-lock :name "rontolisp thread limit" :recursive t)
  "Held from the count of live threads to the start of the new one, so two
threads starting at once cannot both take the last place.")

(defvar *original-process-enable* #'mp:process-enable
  "ECL's own MP:PROCESS-ENABLE (kept once, before it is wrapped).")

(defvar *original-process-run-function* #'mp:process-run-function
  "ECL's own MP:PROCESS-RUN-FUNCTION (kept once, before it is wrapped).")

(defun give-specials-their-slots ()
  "Bind, once and in this thread, every special variable (of every package)
that no thread has bound yet, so that ECL gives it its index in the
threads' tables of bindings now.  ECL 21.2.1 hands the index out on a
variable's first binding without a lock (ecl_bds_bind): two threads
binding it for the first time at once each took an index, the one stored
last won, and the other thread's LET bound a slot nobody reads, so that
thread saw the global value inside its own binding (a question rendered
with every template variable undefined, and no option markers).  A variable
given its index keeps it; a variable first defined after the last thread
started is not covered."
  ;; In C (%SLOT-EVERY-SPECIAL): DO-ALL-SYMBOLS consed 500 KB a walk.
  (%slot-every-special))

(defun call-with-thread-room (name start)
  "Call START (which starts one thread named NAME and answers its process)
when fewer than *THREAD-LIMIT* Lisp threads are alive, else signal
THREAD-LIMIT-ERROR; also when START answers NIL (the system refused the
thread)."
  (mp:with-lock (*thread-lock*)
    (%reserve-thread-slots (+ *thread-limit* +thread-slack+))
    (give-specials-their-slots)
    (let ((live (length (mp:all-processes))))
      (when (>= live *thread-limit*)
        (thread-limit-error *thread-limit* "expected fewer than ~D live Lisp threads ~
(*THREAD-LIMIT*) to start thread ~S, found ~D" *thread-limit* name live)))
    (or (funcall start)
        (thread-limit-error *thread-limit* "expected the system to start thread ~S, found it ~
refused (memory or a process limit)" name))))

(defun guarded-process-enable (process)
  "MP:PROCESS-ENABLE within the thread limit (CALL-WITH-THREAD-ROOM)."
  (call-with-thread-room (mp:process-name process)
                         (lambda () (funcall *original-process-enable* process))))

(defun guarded-process-run-function (name function &rest arguments)
  "MP:PROCESS-RUN-FUNCTION within the thread limit (CALL-WITH-THREAD-ROOM)."
  (call-with-thread-room (if (consp name) (getf name :name) name)
                         (lambda () (apply *original-process-run-function* name function arguments))))

(setf (fdefinition 'mp:process-enable) #'guarded-process-enable
      (fdefinition 'mp:process-run-function) #'guarded-process-run-function)

;;; Spare threads: Lisp threads kept for the next job.  Starting an ECL
;;; thread takes about a millisecond and a half and conses about 1.4 MB
;;; (its stacks and tables of bindings, so a collection every few
;;; starts): work that runs on helper threads many times a second
;;; (MAP-IN-ORDER in a benchmark's rounds, a program asking batches of
;;; questions) takes threads from this pool and gives them back.  A
;;; thread handed out again first gets every special variable defined
;;; since its slot, as a new thread would (GIVE-SPECIALS-THEIR-SLOTS).

(defstruct (spare-thread (:constructor make-spare-thread ()))
  "A thread of the pool: PROCESS, the semaphores GO (a job is waiting in
JOB) and DONE (the job has returned or unwound), FAILURE, the serious
condition that ended the last job, if one did, and ENDED, true once the
thread is leaving (a job unwound past its loop: it is not pooled again)."
  process (go (mp:make-semaphore :name "spare thread go" :count 0))
  (done (mp:make-semaphore :name "spare thread done" :count 0))
  (job nil) (failure nil) (ended nil))

(defconstant +spare-threads-kept+ 16
  "The most idle threads the pool keeps; one given back beyond them ends.")

(defvar *spare-threads* '()
  "The idle threads of the pool (SPARE-THREAD structures).")

(defvar *spare-threads-lock* (mp:make-lock :name "spare threads")
  "Guards *SPARE-THREADS*.")

(defun spare-thread-loop (spare)
  "The life of the pool's thread SPARE: run each job it is given, catching
a serious condition into its FAILURE, until the job is :EXIT."
  (loop
    (mp:wait-on-semaphore (spare-thread-go spare))
    (let ((job (shiftf (spare-thread-job spare) nil)))
      (when (eq job :exit)
        (return))
      (let ((returned nil))
        (unwind-protect
             (progn (handler-case (funcall job)
                      (serious-condition (c) (setf (spare-thread-failure spare) c)))
                    (setf returned t))
          (unless returned
            (setf (spare-thread-ended spare) t))
          (mp:signal-semaphore (spare-thread-done spare)))))))

(defun start-spare-thread (name job)
  "Run JOB (a function of no arguments) on an idle thread of the pool, or
on a new one named NAME (within *THREAD-LIMIT*, CALL-WITH-THREAD-ROOM),
and answer the thread for JOIN-SPARE-THREAD.  JOB sees the global values
of special variables."
  (let ((spare (mp:with-lock (*spare-threads-lock*) (pop *spare-threads*))))
    (if spare
        (mp:with-lock (*thread-lock*)
          (give-specials-their-slots))
        (let ((new (make-spare-thread)))
          ;; GUARDED-PROCESS-RUN-FUNCTION by its own name: this file's
          ;; calls of MP:PROCESS-RUN-FUNCTION were compiled to the original,
          ;; so the new thread started without its specials slotted, and
          ;; the first binding race came back (a question rendered
          ;; without its template variables, 15% of `decide --threads 2'
          ;; runs).
          (setf (spare-thread-process new)
                (guarded-process-run-function name (lambda () (spare-thread-loop new)))
                spare new)))
    (setf (spare-thread-job spare) job)
    (mp:signal-semaphore (spare-thread-go spare))
    spare))

(defun join-spare-thread (spare)
  "Wait until the job of SPARE (from START-SPARE-THREAD) has returned or
unwound and give SPARE back to the pool (or end it when the pool is
full).  Answers the serious condition that ended the job, if one did,
else NIL."
  (mp:wait-on-semaphore (spare-thread-done spare))
  (let ((failure (shiftf (spare-thread-failure spare) nil)))
    (mp:with-lock (*spare-threads-lock*)
      (cond ((spare-thread-ended spare))
            ((< (length *spare-threads*) +spare-threads-kept+)
             (push spare *spare-threads*))
            (t (setf (spare-thread-job spare) :exit)
               (mp:signal-semaphore (spare-thread-go spare)))))
    failure))
