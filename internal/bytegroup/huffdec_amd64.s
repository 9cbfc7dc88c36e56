//go:build !purego

#include "textflag.h"

// BMI2 (SHLX: a shift by any register): four huff0 streams decoded side
// by side, four lookups of each a round, each lookup up to four symbols
// (huffDecoder.multi). The Go caller (huffdec_amd64.go) passes the state;
// a round starts only while every stream has a whole window (8 bytes)
// before its position and 16 bytes of room before its end, and the state
// is written back at the first stream that has not, for Go's loops to
// finish (huffdec.go).

// func decode4(t *[2048]uint64, dst *byte, q *huffQuad)
TEXT ·decode4(SB), NOSPLIT, $0-24
	MOVQ t+0(FP), R8
	MOVQ dst+8(FP), AX
	MOVQ q+16(FP), R9
	// The output offsets and limits become pointers.
	MOVQ 96(R9), SI
	ADDQ AX, SI
	MOVQ 104(R9), DI
	ADDQ AX, DI
	MOVQ 112(R9), BX
	ADDQ AX, BX
	MOVQ 120(R9), DX
	ADDQ AX, DX
	ADDQ AX, 128(R9)
	ADDQ AX, 136(R9)
	ADDQ AX, 144(R9)
	ADDQ AX, 152(R9)
	MOVQ 64(R9), R10
	MOVQ 72(R9), R11
	MOVQ 80(R9), R12
	MOVQ 88(R9), R13

// RELOAD: stream i (position at off(q), first byte at in(q), c, its
// window in v, out) moves its window down by the whole bytes read, or
// the round does not start. R9 is q until it is the scratch of LOOK.
#define RELOAD(in, pos, hi, c, v, out) \
	CMPQ    out, hi(R9) \
	JGT     done \
	MOVQ    c, AX \
	SHRQ    $3, AX \
	NEGQ    AX \
	ADDQ    pos(R9), AX \
	CMPQ    AX, $8 \
	JLT     done \
	MOVQ    AX, pos(R9) \
	ANDQ    $7, c \
	ADDQ    in(R9), AX \
	MOVQ    -8(AX), v

// LOOK: one lookup: the symbols' 4 bytes stored, out advanced by their
// count, c by their bits (and by count<<8, which the round's end masks
// off: the shift reads c's low 6 bits only).
#define LOOK(c, v, out) \
	SHLXQ c, v, AX \
	SHRQ  $53, AX \
	MOVQ  (R8)(AX*8), AX \
	MOVL  AX, (out) \
	SHRQ  $32, AX \
	ADDQ  AX, c \
	SHRL  $8, AX \
	ADDQ  AX, out

loop:
	MOVQ q+16(FP), R9
	RELOAD(0, 32, 128, R10, CX, SI)
	MOVQ CX, 160(R9)
	RELOAD(8, 40, 136, R11, CX, DI)
	MOVQ CX, 168(R9)
	RELOAD(16, 48, 144, R12, R14, BX)
	RELOAD(24, 56, 152, R13, R15, DX)
	MOVQ 160(R9), R9
	MOVQ q+16(FP), CX
	MOVQ 168(CX), CX
	LOOK(R10, R9, SI)
	LOOK(R11, CX, DI)
	LOOK(R12, R14, BX)
	LOOK(R13, R15, DX)
	LOOK(R10, R9, SI)
	LOOK(R11, CX, DI)
	LOOK(R12, R14, BX)
	LOOK(R13, R15, DX)
	LOOK(R10, R9, SI)
	LOOK(R11, CX, DI)
	LOOK(R12, R14, BX)
	LOOK(R13, R15, DX)
	LOOK(R10, R9, SI)
	LOOK(R11, CX, DI)
	LOOK(R12, R14, BX)
	LOOK(R13, R15, DX)
	MOVBQZX R10, R10
	MOVBQZX R11, R11
	MOVBQZX R12, R12
	MOVBQZX R13, R13
	JMP loop

done:
	MOVQ q+16(FP), R9
	MOVQ R10, 64(R9)
	MOVQ R11, 72(R9)
	MOVQ R12, 80(R9)
	MOVQ R13, 88(R9)
	MOVQ dst+8(FP), AX
	SUBQ AX, SI
	SUBQ AX, DI
	SUBQ AX, BX
	SUBQ AX, DX
	MOVQ SI, 96(R9)
	MOVQ DI, 104(R9)
	MOVQ BX, 112(R9)
	MOVQ DX, 120(R9)
	RET

// func buildMulti(single *[2048]uint16, multi *[2048]uint64, cum *[2048]uint16, i, step int)
// huffDecoder.buildGo's inner loop (entries i, i+step, … below 2048), in
// BMI2 (SHLX, SHRX, BZHI: shifts and masks by a register), where Go's
// took twice the instructions and spilled.
TEXT ·buildMulti(SB), NOSPLIT, $0-40
	MOVQ single+0(FP), R8
	MOVQ multi+8(FP), R9
	MOVQ cum+16(FP), R10
	MOVQ i+24(FP), CX
	MOVQ step+32(FP), R15

buildloop:
	CMPQ    CX, $2048
	JGE     builddone
	MOVWQZX (R8)(CX*2), AX  // a
	MOVQ    AX, BX
	SHRQ    $8, BX          // la
	SHLXQ   BX, CX, DX
	ANDQ    $2047, DX       // j: the entry of the remaining bits
	MOVQ    (R9)(DX*8), SI  // e
	MOVWQZX (R10)(DX*2), DI // its ends
	MOVQ    $11, R11
	SUBQ    BX, R11         // r: the bits left
	// R12: how many of e's first three symbols end past r.
	XORQ    R12, R12
	MOVQ    DI, R13
	ANDQ    $15, R13
	CMPQ    R11, R13
	ADCQ    $0, R12
	MOVQ    DI, R13
	SHRQ    $4, R13
	ANDQ    $15, R13
	CMPQ    R11, R13
	ADCQ    $0, R12
	MOVQ    DI, R13
	SHRQ    $8, R13
	ANDQ    $15, R13
	CMPQ    R11, R13
	ADCQ    $0, R12
	MOVQ    $3, R11
	SUBQ    R12, R11        // m: those that end within r
	LEAQ    (R11*4), R12    // 4m
	LEAQ    (R11*8), R13    // 8m
	// The entry: a, e's first m symbols, la + the m-th's end, 1+m.
	MOVQ    DI, R14
	SHLQ    $4, R14
	SHRXQ   R12, R14, R14
	ANDQ    $15, R14
	ADDQ    BX, R14
	SHLQ    $32, R14
	BZHIQ   R13, SI, SI
	SHLQ    $8, SI
	MOVBQZX AX, AX
	ORQ     AX, SI
	ORQ     R14, SI
	LEAQ    1(R11), R14
	SHLQ    $40, R14
	ORQ     R14, SI
	MOVQ    SI, (R9)(CX*8)
	// The ends: la, then la + e's first m, 15 past them.
	IMUL3Q  $0x111, BX, R14
	ADDQ    DI, R14
	BZHIQ   R12, R14, R14
	MOVQ    $0xfff, R13
	SHRXQ   R12, R13, R13
	SHLXQ   R12, R13, R13
	ORQ     R13, R14
	SHLQ    $4, R14
	ANDQ    $0xff0, R14
	ORQ     BX, R14
	MOVW    R14, (R10)(CX*2)
	ADDQ    R15, CX
	JMP     buildloop

builddone:
	RET
