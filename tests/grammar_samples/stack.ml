(** A functional stack. *)
type 'a stack = 'a list

(** Pushes an element. *)
let push x s = x :: s
