//go:build !purego

#include "textflag.h"

// SSE2 only (every amd64 has it): the plane split and join of widths 2
// and 4, 16 elements a step. The Go callers pass n, a multiple of 16, and
// slices that hold n elements.

DATA mask16<>+0(SB)/8, $0x00ff00ff00ff00ff
DATA mask16<>+8(SB)/8, $0x00ff00ff00ff00ff
GLOBL mask16<>(SB), RODATA|NOPTR, $16

DATA mask32<>+0(SB)/8, $0x000000ff000000ff
DATA mask32<>+8(SB)/8, $0x000000ff000000ff
GLOBL mask32<>(SB), RODATA|NOPTR, $16

// SPLIT2 splits the 16 elements at SI into DI and DX (X7: mask16) and
// moves the three on.
#define SPLIT2 \
	MOVOU    0(SI), X0 \
	MOVOU    16(SI), X1 \
	MOVO     X0, X2 \
	MOVO     X1, X3 \
	PAND     X7, X0 \
	PAND     X7, X1 \
	PACKUSWB X1, X0 \
	PSRLW    $8, X2 \
	PSRLW    $8, X3 \
	PACKUSWB X3, X2 \
	MOVOU    X0, 0(DI) \
	MOVOU    X2, 0(DX) \
	ADDQ     $32, SI \
	ADDQ     $16, DI \
	ADDQ     $16, DX

// func split2(src, p0, p1 *byte, n int)
TEXT ·split2(SB), NOSPLIT, $0-32
	MOVQ  src+0(FP), SI
	MOVQ  p0+8(FP), DI
	MOVQ  p1+16(FP), DX
	MOVQ  n+24(FP), CX
	MOVOU mask16<>(SB), X7
	SHRQ  $4, CX
	JZ    split2done

split2loop:
	SPLIT2 // the low bytes of 16 elements, then their high bytes
	DECQ     CX
	JNZ      split2loop

split2done:
	RET

// func split2s(src, p0, p1 *byte, n int, h *[2][256]uint32)
// split2, counting the low and high byte of the first element of each
// 16 into h[0] and h[1] (sampled's bytes, for splitSampled).
TEXT ·split2s(SB), NOSPLIT, $0-40
	MOVQ  src+0(FP), SI
	MOVQ  p0+8(FP), DI
	MOVQ  p1+16(FP), DX
	MOVQ  n+24(FP), CX
	MOVQ  h+32(FP), R8
	MOVOU mask16<>(SB), X7
	SHRQ  $4, CX
	JZ    split2sdone

split2sloop:
	MOVBQZX  0(SI), AX
	MOVBQZX  1(SI), BX
	INCL     (R8)(AX*4)
	INCL     1024(R8)(BX*4)
	SPLIT2
	DECQ     CX
	JNZ      split2sloop

split2sdone:
	RET

// func join2(dst, p0, p1 *byte, n int)
TEXT ·join2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ p0+8(FP), SI
	MOVQ p1+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	JZ   join2done

join2loop:
	MOVOU     0(SI), X0
	MOVOU     0(DX), X1
	MOVO      X0, X2
	PUNPCKLBW X1, X0 // elements 0-7: low byte, high byte
	PUNPCKHBW X1, X2 // elements 8-15
	MOVOU     X0, 0(DI)
	MOVOU     X2, 16(DI)
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       join2loop

join2done:
	RET

// PLANE4 stores byte shift/8 of the 16 elements in X0-X3 at dst.
#define PLANE4(shift, dst) \
	MOVO     X0, X4     \
	MOVO     X1, X5     \
	MOVO     X2, X6     \
	MOVO     X3, X8     \
	PSRLL    $shift, X4 \
	PSRLL    $shift, X5 \
	PSRLL    $shift, X6 \
	PSRLL    $shift, X8 \
	PAND     X15, X4    \
	PAND     X15, X5    \
	PAND     X15, X6    \
	PAND     X15, X8    \
	PACKSSLW X5, X4     \
	PACKSSLW X8, X6     \
	PACKUSWB X6, X4     \
	MOVOU    X4, 0(dst)

// func split4(src, p0, p1, p2, p3 *byte, n int)
TEXT ·split4(SB), NOSPLIT, $0-48
	MOVQ  src+0(FP), SI
	MOVQ  p0+8(FP), R8
	MOVQ  p1+16(FP), R9
	MOVQ  p2+24(FP), R10
	MOVQ  p3+32(FP), R11
	MOVQ  n+40(FP), CX
	MOVOU mask32<>(SB), X15
	SHRQ  $4, CX
	JZ    split4done

split4loop:
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3

	// Byte k of each element: shifted down by 8k, masked, packed from
	// dwords to words to bytes (no value exceeds 255: nothing saturates).
	PLANE4(0, R8)
	PLANE4(8, R9)
	PLANE4(16, R10)
	PLANE4(24, R11)

	ADDQ $64, SI
	ADDQ $16, R8
	ADDQ $16, R9
	ADDQ $16, R10
	ADDQ $16, R11
	DECQ CX
	JNZ  split4loop

split4done:
	RET

// JOIN4 joins 16 elements of four planes, X0-X3, into X0, X6, X4, X7
// (elements 0-3, 4-7, 8-11, 12-15): bytes 0 and 1 interleaved, and 2 and
// 3, then those as words.
#define JOIN4 \
	MOVO      X0, X4 \
	PUNPCKLBW X1, X0 \
	PUNPCKHBW X1, X4 \
	MOVO      X2, X5 \
	PUNPCKLBW X3, X2 \
	PUNPCKHBW X3, X5 \
	MOVO      X0, X6 \
	PUNPCKLWL X2, X0 \
	PUNPCKHWL X2, X6 \
	MOVO      X4, X7 \
	PUNPCKLWL X5, X4 \
	PUNPCKHWL X5, X7

// func join4(dst, p0, p1, p2, p3 *byte, n int)
TEXT ·join4(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ p0+8(FP), R8
	MOVQ p1+16(FP), R9
	MOVQ p2+24(FP), R10
	MOVQ p3+32(FP), R11
	MOVQ n+40(FP), CX
	SHRQ $4, CX
	JZ   join4done

join4loop:
	MOVOU     0(R8), X0
	MOVOU     0(R9), X1
	MOVOU     0(R10), X2
	MOVOU     0(R11), X3
	JOIN4
	MOVOU     X0, 0(DI)
	MOVOU     X6, 16(DI)
	MOVOU     X4, 32(DI)
	MOVOU     X7, 48(DI)
	ADDQ      $16, R8
	ADDQ      $16, R9
	ADDQ      $16, R10
	ADDQ      $16, R11
	ADDQ      $64, DI
	DECQ      CX
	JNZ       join4loop

join4done:
	RET

// func equal2(raw, p0, p1 *byte, n int) bool
TEXT ·equal2(SB), NOSPLIT, $0-33
	MOVQ    raw+0(FP), DI
	MOVQ    p0+8(FP), SI
	MOVQ    p1+16(FP), DX
	MOVQ    n+24(FP), CX
	PCMPEQB X7, X7 // every byte equal so far
	SHRQ    $4, CX
	JZ      equal2done

equal2loop:
	MOVOU     0(SI), X0
	MOVOU     0(DX), X1
	MOVO      X0, X2
	PUNPCKLBW X1, X0
	PUNPCKHBW X1, X2
	MOVOU     0(DI), X3
	MOVOU     16(DI), X4
	PCMPEQB   X3, X0
	PCMPEQB   X4, X2
	PAND      X2, X0
	PAND      X0, X7
	ADDQ      $16, SI
	ADDQ      $16, DX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       equal2loop

equal2done:
	PMOVMSKB X7, AX
	CMPL     AX, $0xffff
	SETEQ    ret+32(FP)
	RET

// func equal4(raw, p0, p1, p2, p3 *byte, n int) bool
TEXT ·equal4(SB), NOSPLIT, $0-49
	MOVQ    raw+0(FP), DI
	MOVQ    p0+8(FP), R8
	MOVQ    p1+16(FP), R9
	MOVQ    p2+24(FP), R10
	MOVQ    p3+32(FP), R11
	MOVQ    n+40(FP), CX
	PCMPEQB X15, X15
	SHRQ    $4, CX
	JZ      equal4done

equal4loop:
	MOVOU     0(R8), X0
	MOVOU     0(R9), X1
	MOVOU     0(R10), X2
	MOVOU     0(R11), X3
	JOIN4
	MOVOU     0(DI), X8
	MOVOU     16(DI), X9
	MOVOU     32(DI), X10
	MOVOU     48(DI), X11
	PCMPEQB   X8, X0
	PCMPEQB   X9, X6
	PCMPEQB   X10, X4
	PCMPEQB   X11, X7
	PAND      X6, X0
	PAND      X7, X4
	PAND      X4, X0
	PAND      X0, X15
	ADDQ      $16, R8
	ADDQ      $16, R9
	ADDQ      $16, R10
	ADDQ      $16, R11
	ADDQ      $64, DI
	DECQ      CX
	JNZ       equal4loop

equal4done:
	PMOVMSKB X15, AX
	CMPL     AX, $0xffff
	SETEQ    ret+48(FP)
	RET
